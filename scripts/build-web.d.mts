// Types of scripts/build-web.mjs for the TypeScript tests that import it.
export declare const ROOT: string;
export declare const WEB: string;
export declare const WEB_DIST: string;
type Log = (message: string) => void;
export declare function webStaleReason(web?: string): Promise<string | undefined>;
export declare function buildWeb(opts?: { web?: string; reason?: string; log?: Log; ifStale?: boolean }): Promise<void>;
export declare function ensureWebBuild(log?: Log): Promise<string>;
