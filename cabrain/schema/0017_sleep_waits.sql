-- A sleep run that must wait says why, and can be cancelled (issue 32). A run's driver writes
-- `note` while a step waits for room on the cluster (which step, what it needs, what is free) and
-- clears it once steps run; `cancel_requested_at` is set by an admin's cancel: the driver starts
-- no further step, withdraws the steps still waiting, lets the running ones finish (each is one
-- transaction) and ends the run 'cancelled'.
ALTER TABLE sleep_runs ADD COLUMN note text;
ALTER TABLE sleep_runs ADD COLUMN cancel_requested_at timestamptz;
ALTER TABLE sleep_runs DROP CONSTRAINT sleep_runs_status_check;
ALTER TABLE sleep_runs ADD CONSTRAINT sleep_runs_status_check
    CHECK (status IN ('running', 'done', 'partial', 'failed', 'cancelled'));
