"""The ReceiptRun steps and the step contracts of both state machines."""
