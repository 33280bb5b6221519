"""The protocol fuzzer (issue 13): mutated Kafka requests against kbroker and Apache Kafka 4.3.1.

Frames recorded from real clients (``record.py``, ``recorded.jsonl``) and generated for every
API key and version kbroker serves (``generate.py``) make the corpus (``corpus.py``); each case is
one of them broken by the operators of ``mutators.py``, aimed by the frame's field layout
(``layout.py``). ``runner.py`` plays the cases against a target on concurrent connections,
reads the answers (``responses.py``) and checks the broker after every batch: alive, answering a
new connection within a second, no unexplained ERROR in its log, nothing changed on disk that
no accepted request explains (``invariants.py``). ``report.py`` keeps the tallies and writes
the side-by-side markdown table; ``world.py`` names the topics every frame speaks of and
``control.py`` is the runner's own well-formed traffic.

``python -m compat.fuzz run --target both --frames 1000000`` is the long run (its report is in
``results/``); ``test_fuzz_slice.py`` is the CI slice; ``python -m compat.fuzz replay --case N``
plays one case again.
"""
