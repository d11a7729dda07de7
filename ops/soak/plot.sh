#!/bin/sh
# plot.sh OUT - OUT/soak.png from OUT/soak.csv and OUT/faults.log (gnuplot):
# messages pushed and delivered per second, and e2e p99 and push p99 on a
# log scale, every 10 s, with a line at each fault.
set -eu
OUT=$1
t0=$(awk -F, 'NR == 2 { print $2 - $1; exit }' "$OUT/soak.csv")
marks=$(awk -v t0="$t0" '{ printf "set arrow from %.0f, graph 0 to %.0f, graph 1 nohead lc rgb \"red\" dt 2\nset label \"%s %s\" at %.0f, graph 0.97 rotate by 90 right font \",8\"\n", $1 - t0, $1 - t0, $2, $3, $1 - t0 + 3 }' "$OUT/faults.log")
gnuplot <<GP
set terminal pngcairo size 1200,800 font ",10"
set output "$OUT/soak.png"
set datafile separator ","
set key autotitle columnhead top left
set multiplot layout 2,1
set title "mayfly soak: rate (10 s windows), faults in red"
set ylabel "msg/s"
set xlabel "s"
$marks
plot "$OUT/soak.csv" using 1:(\$3/10) with lines title "pushed/s", \
     "" using 1:((\$4+\$5)/10) with lines title "delivered/s"
set title "latency p99"
set ylabel "ms"
set logscale y
plot "$OUT/soak.csv" using 1:(\$8 > 0 ? \$8 : 1/0) with lines title "e2e p99", \
     "" using 1:(\$9 > 0 ? \$9 : 1/0) with lines title "push p99", \
     "" using 1:(\$7 > 0 ? \$7 : 1/0) with lines title "e2e p50"
unset multiplot
GP
