"""SASL mechanisms as protocol logic without sockets: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER
servers and the broker's own clients, built per listener from Kafka's JAAS configuration.

The connection's SaslHandshake/SaslAuthenticate state machine (kbroker/network) asks a
listener's ``SaslServerFactory`` for a server and feeds it the client's tokens; the inter-broker
client uses ``client_for``.
"""

from kbroker.security.sasl.factory import SaslServerFactory, client_for
from kbroker.security.sasl.mechanism import SaslAuthenticationError, SaslClient, SaslServer

__all__ = ["SaslAuthenticationError", "SaslClient", "SaslServer", "SaslServerFactory", "client_for"]
