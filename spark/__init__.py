"""PySpark pipelines that read and write kbroker through Spark's stock Kafka connector.

Installed as ``kbroker.spark`` (``pip install 'kbroker[spark]'``); importing it does not import
PySpark. Pipelines: ``generator`` (feeds events), ``streaming_etl`` (windowed aggregation to
Kafka and Parquet), ``batch_replay`` (read by offset or time range into Parquet).
"""
