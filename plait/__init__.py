"""Plait kernel: settings, event schemas, task spec, lifecycle rules, ids and clocks."""
