"""Quick sandboxes: bubblewrap locally, the quick-check Lambda on AWS, and a mock for tests."""
