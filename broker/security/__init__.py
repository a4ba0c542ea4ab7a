"""Authentication: TLS listeners (tls.py), SASL PLAIN and SCRAM (sasl_*.py, scram*.py),
and the principal each connection authenticates as (principal.py), as Kafka's
org.apache.kafka.common.security packages cut them.

Loaded only where a listener needs it: a PLAINTEXT broker imports principal.py and nothing
else of this package.
"""
