-- Workflow learning on real local models (issue 38). Tasks of three more types: a label from a fixed
-- set, Markdown, and JavaScript (scored by its structure and checked by Node.js), beside text, JSON and
-- Python code. And two more kinds of chain: strict (one model, a prompt that holds it to the asked
-- format) and self_check (one model answers, then checks and corrects its own answer).
ALTER TABLE workflow_tasks DROP CONSTRAINT workflow_tasks_task_type_check;
ALTER TABLE workflow_tasks ADD CONSTRAINT workflow_tasks_task_type_check
    CHECK (task_type IN ('text', 'json', 'code', 'label', 'markdown', 'javascript'));
ALTER TABLE chain_attempts DROP CONSTRAINT chain_attempts_chain_kind_check;
ALTER TABLE chain_attempts ADD CONSTRAINT chain_attempts_chain_kind_check
    CHECK (chain_kind IN ('single', 'strict', 'enhanced', 'self_check', 'decompose', 'plan_verify'));
