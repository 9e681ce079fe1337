"""`ssm-conda upload`: publish the output channel's packages (command.py; options.py; targets.py per server)."""
