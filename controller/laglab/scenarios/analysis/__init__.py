"""What a run's figures mean: a point's result and outcome, the bottleneck models, the knee search's judgement."""
