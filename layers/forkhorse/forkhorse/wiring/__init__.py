"""Where adapters are wired to ports: local mode here, AWS in the Lambda handlers."""
