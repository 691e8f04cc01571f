"""What kspark needs of Java: artifacts from Maven Central (:mod:`kspark.jvm.maven`) and the
class data sharing archives that start its JVMs faster (:mod:`kspark.jvm.class_archive`)."""
