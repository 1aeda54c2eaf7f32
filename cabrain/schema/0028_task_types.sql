-- Workflow tasks of three more types (issue 38: the testbed's kinds): a label from a fixed set,
-- Markdown, and JavaScript (scored by its structure and checked by Node.js), beside text, JSON and
-- Python code.
ALTER TABLE workflow_tasks DROP CONSTRAINT workflow_tasks_task_type_check;
ALTER TABLE workflow_tasks ADD CONSTRAINT workflow_tasks_task_type_check
    CHECK (task_type IN ('text', 'json', 'code', 'label', 'markdown', 'javascript'));
