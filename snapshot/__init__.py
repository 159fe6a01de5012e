"""Per-tenant snapshot and restore: one tenant's etcd prefix and identity Secrets in a file (docs/operations.md)."""
