import 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL of a database on the run's PostgreSQL server from which per-test databases are created. */
    adminDatabaseUrl: string;
  }
}
