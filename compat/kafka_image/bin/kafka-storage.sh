#!/bin/sh
# Kafka's storage tool (format, random-uuid) on the image's jars.
exec java ${KAFKA_HEAP_OPTS:--Xmx256m} -XX:TieredStopAtLevel=1 \
    -Dlog4j2.configurationFile=/opt/kafka/config/tools-log4j2.properties \
    -cp '/opt/kafka/libs/*' kafka.tools.StorageTool "$@"
