"""The model's side of a step: the protocol a reply is read with, the action contract, model
errors as stop reasons, retries, and what a call cost."""
