#!/bin/sh
# A Kafka node from a server.properties (the first argument); logs go to standard output.
exec java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g} -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties \
    -cp '/opt/kafka/libs/*' kafka.Kafka "$@"
