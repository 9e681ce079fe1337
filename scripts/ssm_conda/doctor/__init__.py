"""`ssm-conda doctor`: which causal-conv1d package fits this machine (facts -> rules -> advice -> report)."""
