"""Pop-ups over the main screen (help, a finding, a process, the notices), one per file."""
