# bench/neighbours.sh: sourced by the benchmarks that time a step beside busy processes of their
# own (omp_wait.sh, busy_machine.sh) and by those that take medians (dp_scaling.sh): one
# definition of a neighbour (a busy loop in this session, so the scheduler shares the cores
# between it and the step as between a user's own jobs), of stopping them, and of the median.
# The sourcing script sets its own EXIT trap and calls stop_busy from it.
busy=()
start_busy() {  # start_busy N: N busy loops, their pids in busy[]
  local i
  for ((i = 0; i < $1; i++)); do (while :; do :; done) & busy+=($!); done
}
stop_busy() { ((${#busy[@]})) && kill "${busy[@]}" 2> /dev/null; wait 2> /dev/null; busy=(); }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
