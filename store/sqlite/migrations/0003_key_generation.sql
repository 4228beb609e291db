-- Every tenant counts its keys: tokens signed for a tenant name the
-- generation, so rotating the key (SetKey) revokes them.
ALTER TABLE tenants ADD COLUMN key_generation INTEGER NOT NULL DEFAULT 1;
