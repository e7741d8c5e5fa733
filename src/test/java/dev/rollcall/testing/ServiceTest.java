package dev.rollcall.testing;

import io.quarkus.test.common.TestResourceScope;
import io.quarkus.test.common.WithTestResource;
import io.quarkus.test.junit.QuarkusTest;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * A test against the running service and its real PostgreSQL. Every class so annotated shares one
 * database and one Quarkus boot.
 */
@QuarkusTest
@WithTestResource(value = RollcallTestResource.class, scope = TestResourceScope.GLOBAL)
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
public @interface ServiceTest {}
