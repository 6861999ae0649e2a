"""Running a plan: the run's thread and cleanup (runner.py), each point's measuring steps, recording and timeline, and the files a run writes about itself."""
