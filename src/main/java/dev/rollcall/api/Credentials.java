package dev.rollcall.api;

import dev.rollcall.admin.AdminAuth;
import dev.rollcall.registry.Registrations;
import io.smallrye.mutiny.Uni;
import jakarta.ws.rs.container.ContainerRequestContext;
import jakarta.ws.rs.container.ResourceInfo;
import jakarta.ws.rs.core.HttpHeaders;
import java.lang.reflect.Method;
import org.eclipse.microprofile.openapi.OASFactory;
import org.eclipse.microprofile.openapi.annotations.security.SecurityRequirement;
import org.eclipse.microprofile.openapi.models.Components;
import org.eclipse.microprofile.openapi.models.security.SecurityScheme;
import org.jboss.resteasy.reactive.server.ServerRequestFilter;

/**
 * Who a request comes from, decided once before the endpoint runs, from the same {@code
 * SecurityRequirement} that tells the OpenAPI document which token an endpoint needs: {@value
 * #INSTANCE_TOKEN} endpoints get the instance their bearer token belongs to ({@link
 * RequestCaller}), {@value #ADMIN_TOKEN} endpoints are refused unless the request carries the admin
 * token. A refusal is a problem document ({@code unauthorized}, {@code forbidden}).
 */
public class Credentials {

  /** The security scheme of endpoints called with the token an instance's registration returned. */
  static final String INSTANCE_TOKEN = "instanceToken";

  /** The security scheme of the admin API: {@code rollcall.admin.token}. */
  static final String ADMIN_TOKEN = "adminToken";

  /** Adds the bearer schemes the endpoints' {@code SecurityRequirement}s name. */
  static void describe(Components components) {
    components.addSecurityScheme(
        INSTANCE_TOKEN, bearer("the token an instance's registration returned"));
    components.addSecurityScheme(ADMIN_TOKEN, bearer("rollcall.admin.token"));
  }

  private static SecurityScheme bearer(String description) {
    return OASFactory.createSecurityScheme()
        .type(SecurityScheme.Type.HTTP)
        .scheme("bearer")
        .description(description);
  }

  private final Registrations instances;
  private final AdminAuth admin;
  private final RequestCaller caller;

  Credentials(Registrations instances, AdminAuth admin, RequestCaller caller) {
    this.instances = instances;
    this.admin = admin;
    this.caller = caller;
  }

  @ServerRequestFilter
  public Uni<Void> resolve(ContainerRequestContext request, ResourceInfo resource) {
    String authorization = request.getHeaderString(HttpHeaders.AUTHORIZATION);
    String scheme = scheme(resource);
    if (ADMIN_TOKEN.equals(scheme)) {
      return Uni.createFrom().item(() -> authorization).invoke(admin::require).replaceWithVoid();
    }
    if (INSTANCE_TOKEN.equals(scheme)) {
      return Uni.createFrom()
          .item(() -> Requests.bearer(authorization))
          .chain(instances::authenticate)
          .invoke(caller::set)
          .replaceWithVoid();
    }
    return Uni.createFrom().voidItem();
  }

  /** The security scheme the endpoint requires (its own, else its resource's), or null. */
  private static String scheme(ResourceInfo resource) {
    Method method = resource.getResourceMethod();
    if (method == null) {
      return null;
    }
    SecurityRequirement required = method.getAnnotation(SecurityRequirement.class);
    if (required == null) {
      required = resource.getResourceClass().getAnnotation(SecurityRequirement.class);
    }
    return required == null ? null : required.name();
  }
}
