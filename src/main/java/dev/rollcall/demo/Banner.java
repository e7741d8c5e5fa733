package dev.rollcall.demo;

/**
 * The demo's last words before it waits: where the console is, the admin token, a request to try
 * (the README's first one) and how to stop. Plain text lines, so that they stay on the screen.
 */
public final class Banner {

  private Banner() {}

  /** The request to try: register an instance in the demo namespace. */
  static String tryCommand(int httpPort) {
    return "curl -s -X POST localhost:"
        + httpPort
        + "/instances -H 'Authorization: Bearer "
        + EmbeddedDatabase.DEMO_SECRET
        + "' -H 'Content-Type: application/json'"
        + " -d '{\"namespace\":\"demo\",\"deploymentId\":\"rev-1\",\"name\":\"web-1\"}'";
  }

  /**
   * The banner for a service on {@code httpPort} over the embedded database on {@code dbPort}.
   * {@code madeUpToken} is the admin token the demo made up, or null when the user set one.
   */
  public static String text(int httpPort, int dbPort, String madeUpToken) {
    String token =
        madeUpToken != null
            ? madeUpToken
            : "the one you set (rollcall.admin.token / ROLLCALL_ADMIN_TOKEN)";
    return String.join(
        "\n",
        "Rollcall demo ready.",
        "  Console      http://localhost:" + httpPort + "/  (sign in with the admin token)",
        "  Admin token  " + token,
        "  Try          " + tryCommand(httpPort),
        "  Database     embedded PostgreSQL on localhost:"
            + dbPort
            + " (user postgres, password postgres); namespace demo over demo.runs, "
            + EmbeddedDatabase.DEMO_ACTIVE_RUNS
            + " active runs",
        "  Stop         Ctrl+C (the embedded database and its data go with it)");
  }
}
