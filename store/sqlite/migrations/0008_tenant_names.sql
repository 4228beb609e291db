-- Version 7: a tenant's name is unique, as its id is, so a name addresses
-- one tenant wherever an id does (`sandlot mcp --tenant default`). An empty
-- name is no name and may repeat. Tenants that share a name keep the oldest
-- one's; the others get their id's first 8 characters appended, before the
-- index can be made.

UPDATE tenants SET name = name || '-' || substr(id, 1, 8)
WHERE name <> '' AND EXISTS (
    SELECT 1 FROM tenants o
    WHERE o.name = tenants.name
      AND (o.created_at < tenants.created_at OR (o.created_at = tenants.created_at AND o.id < tenants.id))
);

CREATE UNIQUE INDEX tenants_name ON tenants (name) WHERE name <> '';
