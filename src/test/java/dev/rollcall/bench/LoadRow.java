package dev.rollcall.bench;

/**
 * One load benchmark run's figures as a row of {@code -Dbench.results} ({@link ResultsFile}), the
 * same figures its printed report gives: the load asked for, what the fleet's heartbeats and the
 * claims met in the window (ms; −1: no sample), the CPU each party used (cores over the window),
 * the driver's own lag and whether it lagged ({@link DriverLag}), errors (every kind, the 410s of
 * lost leases included), leases lost, and the service's most resident memory in the window.
 */
record LoadRow(
    int instances,
    long heartbeatMs,
    int claimers,
    int seconds,
    double beatsPerSecond,
    long heartbeatP50,
    long heartbeatP99,
    long claimP50,
    long claimP99,
    double beatsPerTransaction,
    double serviceCores,
    double postgresCores,
    double driverCores,
    long heartbeatWaitP99,
    long claimLateP99,
    long errors,
    long leasesLost,
    long serviceRssMiB) {

  /** The row, with {@code driver_lagging} by {@code -Dbench.max-driver-lag-ms}. */
  ResultsFile.Row row() {
    return row(DriverLag.maxMs());
  }

  ResultsFile.Row row(long maxDriverLagMs) {
    return new ResultsFile.Row()
        .put("instances", instances)
        .put("heartbeat_ms", heartbeatMs)
        .put("claimers", claimers)
        .put("seconds", seconds)
        .put("beats_per_s", beatsPerSecond)
        .put("heartbeat_p50_ms", heartbeatP50)
        .put("heartbeat_p99_ms", heartbeatP99)
        .put("claim_p50_ms", claimP50)
        .put("claim_p99_ms", claimP99)
        .put("beats_per_transaction", beatsPerTransaction)
        .put("service_cpu_cores", serviceCores)
        .put("postgres_cpu_cores", postgresCores)
        .put("driver_cpu_cores", driverCores)
        .put("heartbeat_wait_p99_ms", heartbeatWaitP99)
        .put("claim_late_p99_ms", claimLateP99)
        .put("errors", errors)
        .put("leases_lost", leasesLost)
        .put("service_rss_mib", serviceRssMiB)
        .put("max_driver_lag_ms", maxDriverLagMs)
        .put("driver_lagging", DriverLag.lagging(heartbeatWaitP99, claimLateP99, maxDriverLagMs));
  }
}
