"""The run kernel: create, capacity, queue, heartbeat and the ONE lifecycle that every kind of run follows.

It sits on the models and knows no room: tutoring, drift and suites hand it their work.
"""
