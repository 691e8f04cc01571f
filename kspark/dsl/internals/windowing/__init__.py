"""Windowed aggregations: what they share (:mod:`.common`), tumbling and hopping windows
(:mod:`.time_windows`), sliding windows (:mod:`.sliding`) and session windows (:mod:`.session`,
with its vectorised batch path in :mod:`.session_batch`)."""
