"""`ssm-conda doctor`: which causal-conv1d package fits this machine.

facts (what the machine and the target environment have, and how it is probed), rules (the
advice, one small function per trap), advice (variant choice, rules in order, commands), report
(text and JSON), command (the subcommand's options and run).
"""
