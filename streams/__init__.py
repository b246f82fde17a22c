"""The Faust app and its agents: admission, fetching, shard writing,
finalizing, lifecycle projection. Agents are thin; logic lives in plain
functions in the modules beside them."""
