// Types of scripts/build.mjs for the TypeScript tests that import it.
export declare const ROOT: string;
export declare const DIST: string;
export declare const DIST_CLI: string;
type Log = (message: string) => void;
export declare function fingerprint(root?: string): Promise<string>;
export declare function staleReason(root?: string): Promise<string | undefined>;
export declare function buildServer(opts?: { root?: string; reason?: string; log?: Log }): Promise<void>;
export declare function ensureServerBuild(opts?: { root?: string; log?: Log }): Promise<string>;
export declare function ensureWebBuildIfPresent(root?: string): Promise<boolean>;
