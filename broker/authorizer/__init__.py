"""Authorization: ACLs as Kafka's AclAuthorizer keeps and applies them (acl.py the model,
authorizer.py the decisions, store.py where they live on a single broker)."""
