-- Placeholder for the lead's 0006 of issue 30 (reserved while it was
-- written in parallel): it keeps the numbering contiguous for 0007 on the
-- branch that adds the sweep. Replaced by the real 0006 when merged.
SELECT 1;
