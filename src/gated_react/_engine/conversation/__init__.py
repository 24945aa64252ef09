"""The conversation: ``messages`` as create_agent stores them, the runs on a thread (turns),
what the model is sent (the prompt and transcript), the step in hand, and what a chat client
sees stream."""
