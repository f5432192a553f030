"""Batch migration of many repositories: each one its own project (config, ignore files,
cross-file analysis), results grouped per repository, progress, reports, patches and branches."""
