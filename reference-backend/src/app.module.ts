/**
 * The reference backend's root module: the controllers of the service API, one in-memory {@link Store}
 * per application instance, the global credentials guard and the global whitelisting validation pipe.
 */
import { type DynamicModule, Module, ValidationPipe } from '@nestjs/common';
import { APP_GUARD, APP_PIPE } from '@nestjs/core';
import {
  FilesController,
  HealthController,
  MetadataTypesController,
  MissionsController,
  ProjectsController,
  UserController,
} from './controllers';
import { CredentialsGuard } from './credentials.guard';
import { Store } from './store';

/** Options of {@link appModule}. */
export interface AppModuleOptions {
  /** Load the deterministic seed (`SEED_IDS`); default `true`. */
  readonly seed?: boolean;
}

/**
 * The validation pipe of the real service (issue 12 item 5): unknown body members and query parameters
 * are rejected (`property <name> should not exist`), values converted by the DTOs' `@Type`s.
 */
export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true });
}

/** The root module class; {@link appModule} gives it its controllers and providers. */
@Module({})
export class AppModule {}

/**
 * The root module with a fresh store.
 * @param options {@link AppModuleOptions}.
 * @returns A dynamic module for `NestFactory.create`.
 */
export function appModule(options: AppModuleOptions = {}): DynamicModule {
  return {
    module: AppModule,
    controllers: [
      HealthController,
      UserController,
      MetadataTypesController,
      MissionsController,
      ProjectsController,
      FilesController,
    ],
    providers: [
      { provide: Store, useFactory: () => new Store(options.seed !== false) },
      { provide: APP_GUARD, useClass: CredentialsGuard },
      { provide: APP_PIPE, useFactory: createValidationPipe },
    ],
  };
}
