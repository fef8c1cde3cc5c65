"""What drives the workflows, in three places:

- `workflow`: the ReceiptRun steps and the contracts both state machines pass between
  states; Lambda handlers and the local supervisor call the same functions.
- `local`: the stand-in for Step Functions in local mode (supervisor, fair scheduler,
  execution history, the local promote machine).
- `upkeep`: what cleans up after executions die or forks grow (recovery, pack collector).

The promote workflow's steps live with the promote use case, in `service.promote`.
"""
