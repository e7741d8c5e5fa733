package dev.rollcall.api;

import jakarta.ws.rs.GET;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.core.Response;
import java.net.URI;
import org.eclipse.microprofile.openapi.annotations.Operation;

/** {@code /} leads to the admin console. */
@Path("/")
public class RootResource {

  /** A redirect to the console. */
  @GET
  @Operation(hidden = true)
  public Response root() {
    return Response.seeOther(URI.create("/console/")).build();
  }
}
