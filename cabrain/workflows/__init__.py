"""Workflow learning: learn which tasks local models can take over from frontier models, and route
them (design 003). Faces call :class:`cabrain.workflows.facade.Workflows`. Tasks are dispatched
(:mod:`.dispatch`), queued (:mod:`.queue`), learned from offline (:mod:`.learn`, Ray tasks), scored
(:mod:`.scoring`), clustered into kinds (:mod:`.clusters`) and reported on (:mod:`.report`); models
are registered in :mod:`.registry`."""

# How a task's output is checked (cabrain.workflows.scoring); here, where importing it costs nothing
TASK_TYPES = ("text", "json", "code", "label", "markdown", "javascript")
