"""Joins: stream-stream (:mod:`.stream_stream`), stream-table and stream-global-table
(:mod:`.stream_table`), table-table on the primary key (:mod:`.table_table`) and on a foreign key
(:mod:`.foreign_key`); :mod:`.builders` adds each to the graph as Kafka Streams lays it out."""
