# fish completion for pool-run, generated from its grammar by internal/cli/clidoc (go generate ./internal/cli/clidoc); do not edit.
# Install it as fish/vendor_completions.d/pool-run.fish (or in ~/.config/fish/completions).

complete -c pool-run -f

function __durable_lease_pool_run_command
	set -l words (commandline -opc)
	set -l i 2
	while test $i -le (count $words)
		switch $words[$i]
			case --owner --pool --kind --gate --store --owner-pattern --ttl --heartbeat --kill-grace --wait-ms --payload --summary-json --poll-ms --provision-cmd --reset-cmd --health-cmd --containment --cgroup-parent
				set i (math $i + 2)
			case --
				set i (math $i + 1)
				break
			case '-*'
				set i (math $i + 1)
			case '*'
				break
		end
	end
	test $i -le (count $words); or return 1
	printf '%s\n' $words[$i..-1]
end

complete -c pool-run -n 'not __durable_lease_pool_run_command' -l help -s h -d 'Show context-sensitive help'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l owner -x -d 'Who holds the lease'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l pool -r -F -d 'Take a slot of this pool file'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l kind -x -d 'Hold this one lease (a baton) instead of a slot'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l gate -r -F -d 'Run the phases of this gate file (YAML) instead of a command'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l store -x -a '(__fish_complete_directories (commandline -ct))' -d 'Lease store directory, or a store URL'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l owner-pattern -x -d 'Owner fence: an anchored regular expression'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l ttl -x -d 'Lease TTL in minutes, fractions allowed'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l heartbeat -x -d 'Time between heartbeats, e.g'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l kill-grace -x -d 'Time between SIGTERM and SIGKILL when the command is stopped'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l no-wait -d 'Take a slot (or the baton) now or give up at once'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l wait-ms -x -d 'Give up after this many milliseconds of waiting (exit 1, code timeout); 0 is --no-wait'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l payload -x -d 'A JSON value kept with a baton lease, shown by lease status'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l summary-json -r -F -d 'Also write how the run ended as JSON to FILE'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l poll-ms -x -d 'How often a queued waiter re-checks when no file event wakes it'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l provision-cmd -x -d 'Override the pool file\'s provision command'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l reset-cmd -x -d 'Override the pool file\'s reset command'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l health-cmd -x -d 'Override the pool file\'s health command'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l no-pty -d 'Never give the command a pseudo-terminal, even when stdin and stdout are a terminal'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l containment -x -a 'auto cgroup tree' -d 'How the work is held: a cgroup of its own where one can be made (auto, the default), a cgroup or fail (cgroup), or the guardian\'s process tree'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l cgroup-parent -x -a '(__fish_complete_directories (commandline -ct))' -d 'The cgroup v2 directory to make the run\'s cgroup in'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l explain -d 'Say how a run with these flags would hold its work (containment, the shortest TTL it keeps) as JSON, and exit without acquiring anything'
complete -c pool-run -n 'not __durable_lease_pool_run_command' -l version -d 'Print the version and the commit this build was made from, and exit'
complete -c pool-run -n 'not __durable_lease_pool_run_command; and not string match -q -- "-*" (commandline -ct)' -a '(__fish_complete_command)'
complete -c pool-run -n __durable_lease_pool_run_command -a '(complete -C (string join " " -- (string escape -- (__durable_lease_pool_run_command)) (commandline -ct)))'
