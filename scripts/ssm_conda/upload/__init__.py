"""`ssm-conda upload`: publish the output channel's packages (command.py; targets.py and s3.py per server)."""
