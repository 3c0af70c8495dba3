# fish completion for lease, generated from its grammar by internal/cli/clidoc (go generate ./internal/cli/clidoc); do not edit.
# Install it as fish/vendor_completions.d/lease.fish (or in ~/.config/fish/completions).

complete -c lease -f

# The verbs, and the flags before one.
complete -c lease -n __fish_use_subcommand -a acquire -d 'Take the lease on a kind; refuse (exit 1) if it is held, or wait with --wait-ms'
complete -c lease -n __fish_use_subcommand -a heartbeat -d 'Refresh a lease you hold'
complete -c lease -n __fish_use_subcommand -a release -d 'Give a lease back (needs owner and token), or remove it with --force'
complete -c lease -n __fish_use_subcommand -a status -d 'Read a lease: state free, held or unknown'
complete -c lease -n __fish_use_subcommand -a reap -d 'Remove a dead (expired or unreadable) lease; refuses a live one'
complete -c lease -n __fish_use_subcommand -a list -d 'Read every lease in the store'
complete -c lease -n __fish_use_subcommand -a reconcile -d 'Session-start sweep: reap dead leases inside the owner fence, report live and foreign ones'
complete -c lease -n __fish_use_subcommand -a version -d 'Print the version and the commit this build was made from'
complete -c lease -n __fish_use_subcommand -l help -s h -d 'Show context-sensitive help'
complete -c lease -n __fish_use_subcommand -l store -x -a '(__fish_complete_directories (commandline -ct))' -d 'Store directory, or a store URL'
complete -c lease -n __fish_use_subcommand -l owner-pattern -x -d 'Owner fence: an anchored regular expression (^...$) every owner must match'
complete -c lease -n __fish_use_subcommand -l pretty -d 'Indent the JSON output'
complete -c lease -n __fish_use_subcommand -l reveal-tokens -d 'Print tokens in full where they are otherwise shown as sha256: fingerprints'
complete -c lease -n __fish_use_subcommand -l version -d 'Print the version and the commit this build was made from, and exit'

# lease acquire
complete -c lease -n '__fish_seen_subcommand_from acquire' -l help -s h -d 'Show context-sensitive help'
complete -c lease -n '__fish_seen_subcommand_from acquire' -l store -x -a '(__fish_complete_directories (commandline -ct))' -d 'Store directory, or a store URL'
complete -c lease -n '__fish_seen_subcommand_from acquire' -l owner-pattern -x -d 'Owner fence: an anchored regular expression (^...$) every owner must match'
complete -c lease -n '__fish_seen_subcommand_from acquire' -l pretty -d 'Indent the JSON output'
complete -c lease -n '__fish_seen_subcommand_from acquire' -l reveal-tokens -d 'Print tokens in full where they are otherwise shown as sha256: fingerprints'
complete -c lease -n '__fish_seen_subcommand_from acquire' -l version -d 'Print the version and the commit this build was made from, and exit'
complete -c lease -n '__fish_seen_subcommand_from acquire' -l kind -x -d 'Lease kind: a slug matching ^[a-z0-9][a-z0-9._-]{0,127}$'
complete -c lease -n '__fish_seen_subcommand_from acquire' -l owner -x -d 'Who holds the lease'
complete -c lease -n '__fish_seen_subcommand_from acquire' -l ttl -x -d 'Minutes of silence before the lease expires; fractions allowed'
complete -c lease -n '__fish_seen_subcommand_from acquire' -l payload -x -d 'Any JSON value to keep with the lease'
complete -c lease -n '__fish_seen_subcommand_from acquire' -l wait-ms -x -d 'If held, wait up to this many milliseconds for it to come free'

# lease heartbeat
complete -c lease -n '__fish_seen_subcommand_from heartbeat' -l help -s h -d 'Show context-sensitive help'
complete -c lease -n '__fish_seen_subcommand_from heartbeat' -l store -x -a '(__fish_complete_directories (commandline -ct))' -d 'Store directory, or a store URL'
complete -c lease -n '__fish_seen_subcommand_from heartbeat' -l owner-pattern -x -d 'Owner fence: an anchored regular expression (^...$) every owner must match'
complete -c lease -n '__fish_seen_subcommand_from heartbeat' -l pretty -d 'Indent the JSON output'
complete -c lease -n '__fish_seen_subcommand_from heartbeat' -l reveal-tokens -d 'Print tokens in full where they are otherwise shown as sha256: fingerprints'
complete -c lease -n '__fish_seen_subcommand_from heartbeat' -l version -d 'Print the version and the commit this build was made from, and exit'
complete -c lease -n '__fish_seen_subcommand_from heartbeat' -l kind -x -d 'Lease kind'
complete -c lease -n '__fish_seen_subcommand_from heartbeat' -l owner -x -d 'The owner that acquired it'
complete -c lease -n '__fish_seen_subcommand_from heartbeat' -l token -x -d 'The fencing token from acquire'

# lease release
complete -c lease -n '__fish_seen_subcommand_from release' -l help -s h -d 'Show context-sensitive help'
complete -c lease -n '__fish_seen_subcommand_from release' -l store -x -a '(__fish_complete_directories (commandline -ct))' -d 'Store directory, or a store URL'
complete -c lease -n '__fish_seen_subcommand_from release' -l owner-pattern -x -d 'Owner fence: an anchored regular expression (^...$) every owner must match'
complete -c lease -n '__fish_seen_subcommand_from release' -l pretty -d 'Indent the JSON output'
complete -c lease -n '__fish_seen_subcommand_from release' -l reveal-tokens -d 'Print tokens in full where they are otherwise shown as sha256: fingerprints'
complete -c lease -n '__fish_seen_subcommand_from release' -l version -d 'Print the version and the commit this build was made from, and exit'
complete -c lease -n '__fish_seen_subcommand_from release' -l kind -x -d 'Lease kind'
complete -c lease -n '__fish_seen_subcommand_from release' -l owner -x -d 'The owner that acquired it'
complete -c lease -n '__fish_seen_subcommand_from release' -l token -x -d 'The fencing token from acquire'
complete -c lease -n '__fish_seen_subcommand_from release' -l force -d 'Operator escape hatch: remove the lease whoever holds it, without a token'

# lease status
complete -c lease -n '__fish_seen_subcommand_from status' -l help -s h -d 'Show context-sensitive help'
complete -c lease -n '__fish_seen_subcommand_from status' -l store -x -a '(__fish_complete_directories (commandline -ct))' -d 'Store directory, or a store URL'
complete -c lease -n '__fish_seen_subcommand_from status' -l owner-pattern -x -d 'Owner fence: an anchored regular expression (^...$) every owner must match'
complete -c lease -n '__fish_seen_subcommand_from status' -l pretty -d 'Indent the JSON output'
complete -c lease -n '__fish_seen_subcommand_from status' -l reveal-tokens -d 'Print tokens in full where they are otherwise shown as sha256: fingerprints'
complete -c lease -n '__fish_seen_subcommand_from status' -l version -d 'Print the version and the commit this build was made from, and exit'
complete -c lease -n '__fish_seen_subcommand_from status' -l kind -x -d 'Lease kind'

# lease reap
complete -c lease -n '__fish_seen_subcommand_from reap' -l help -s h -d 'Show context-sensitive help'
complete -c lease -n '__fish_seen_subcommand_from reap' -l store -x -a '(__fish_complete_directories (commandline -ct))' -d 'Store directory, or a store URL'
complete -c lease -n '__fish_seen_subcommand_from reap' -l owner-pattern -x -d 'Owner fence: an anchored regular expression (^...$) every owner must match'
complete -c lease -n '__fish_seen_subcommand_from reap' -l pretty -d 'Indent the JSON output'
complete -c lease -n '__fish_seen_subcommand_from reap' -l reveal-tokens -d 'Print tokens in full where they are otherwise shown as sha256: fingerprints'
complete -c lease -n '__fish_seen_subcommand_from reap' -l version -d 'Print the version and the commit this build was made from, and exit'
complete -c lease -n '__fish_seen_subcommand_from reap' -l kind -x -d 'Lease kind'

# lease list
complete -c lease -n '__fish_seen_subcommand_from list' -l help -s h -d 'Show context-sensitive help'
complete -c lease -n '__fish_seen_subcommand_from list' -l store -x -a '(__fish_complete_directories (commandline -ct))' -d 'Store directory, or a store URL'
complete -c lease -n '__fish_seen_subcommand_from list' -l owner-pattern -x -d 'Owner fence: an anchored regular expression (^...$) every owner must match'
complete -c lease -n '__fish_seen_subcommand_from list' -l pretty -d 'Indent the JSON output'
complete -c lease -n '__fish_seen_subcommand_from list' -l reveal-tokens -d 'Print tokens in full where they are otherwise shown as sha256: fingerprints'
complete -c lease -n '__fish_seen_subcommand_from list' -l version -d 'Print the version and the commit this build was made from, and exit'

# lease reconcile
complete -c lease -n '__fish_seen_subcommand_from reconcile' -l help -s h -d 'Show context-sensitive help'
complete -c lease -n '__fish_seen_subcommand_from reconcile' -l store -x -a '(__fish_complete_directories (commandline -ct))' -d 'Store directory, or a store URL'
complete -c lease -n '__fish_seen_subcommand_from reconcile' -l owner-pattern -x -d 'Owner fence: an anchored regular expression (^...$) every owner must match'
complete -c lease -n '__fish_seen_subcommand_from reconcile' -l pretty -d 'Indent the JSON output'
complete -c lease -n '__fish_seen_subcommand_from reconcile' -l reveal-tokens -d 'Print tokens in full where they are otherwise shown as sha256: fingerprints'
complete -c lease -n '__fish_seen_subcommand_from reconcile' -l version -d 'Print the version and the commit this build was made from, and exit'

# lease version
complete -c lease -n '__fish_seen_subcommand_from version' -l help -s h -d 'Show context-sensitive help'
complete -c lease -n '__fish_seen_subcommand_from version' -l store -x -a '(__fish_complete_directories (commandline -ct))' -d 'Store directory, or a store URL'
complete -c lease -n '__fish_seen_subcommand_from version' -l owner-pattern -x -d 'Owner fence: an anchored regular expression (^...$) every owner must match'
complete -c lease -n '__fish_seen_subcommand_from version' -l pretty -d 'Indent the JSON output'
complete -c lease -n '__fish_seen_subcommand_from version' -l reveal-tokens -d 'Print tokens in full where they are otherwise shown as sha256: fingerprints'
complete -c lease -n '__fish_seen_subcommand_from version' -l version -d 'Print the version and the commit this build was made from, and exit'
