-- Version 14: a tenant's choice of the entity types the egress guard finds
-- in its output (docs/guard.md, "People, places and organisations"). NULL:
-- the daemon's default (serve --guard-entities); '' none; else the types
-- joined by commas.
ALTER TABLE tenants ADD COLUMN guard_entities TEXT;
