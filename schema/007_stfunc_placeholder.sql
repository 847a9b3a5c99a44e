-- Placeholder that keeps the migrations numbered without gaps on branch h-stfunc, whose
-- 008 follows the lead's 007_probe_verdicts.sql. DELETE THIS FILE when merging.
SELECT 1;
