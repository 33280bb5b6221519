"""The node's HTTP side (``kbroker.http.listeners``): health probes, Prometheus ``/metrics`` and
the routes the web console registers, served from the node's own event loop."""
