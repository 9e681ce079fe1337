"""`ssm-conda upload`: publish the output channel's packages (command.py: its command line and run; targets.py per server)."""
