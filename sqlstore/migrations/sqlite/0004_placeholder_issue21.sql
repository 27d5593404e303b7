-- PLACEHOLDER, to be deleted when issue 21's 0004_identity_providers.sql
-- is merged: migrations are numbered contiguously, and 0004 is issue 21's.
-- Holds nothing so that 0005 (issue 22) applies on this branch.
SELECT 1;
