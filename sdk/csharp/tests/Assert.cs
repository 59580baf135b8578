// Assertions that say what differed.
using System;
using System.Collections.Generic;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal sealed class AssertionException : Exception
    {
        public AssertionException(string message) : base(message) { }
    }

    internal static class Assert
    {
        public static void True(bool condition, string what)
        {
            if (!condition) throw new AssertionException("expected: " + what);
        }

        public static void Equal<T>(T expected, T actual, string what = null)
        {
            if (!EqualityComparer<T>.Default.Equals(expected, actual))
                throw new AssertionException((what != null ? what + ": " : "") + "expected <" + Show(expected) + "> but got <" + Show(actual) + ">");
        }

        public static void NotNull(object value, string what)
        {
            if (value == null) throw new AssertionException(what + " is null");
        }

        private static string Show(object o)
        {
            return o == null ? "null" : o.ToString();
        }

        /// <summary>Runs an async call that must fail with a KeywardenException, and returns it.</summary>
        public static async Task<KeywardenException> Fails(Func<Task> call, string what = "call")
        {
            try
            {
                await call().ConfigureAwait(false);
            }
            catch (KeywardenException e)
            {
                return e;
            }
            catch (Exception e)
            {
                throw new AssertionException(what + " threw " + e.GetType().Name + " instead of KeywardenException: " + e.Message);
            }
            throw new AssertionException(what + " succeeded but should have failed");
        }

        public static KeywardenException FailsSync(Action call, string what = "call")
        {
            try
            {
                call();
            }
            catch (KeywardenException e)
            {
                return e;
            }
            catch (Exception e)
            {
                throw new AssertionException(what + " threw " + e.GetType().Name + " instead of KeywardenException: " + e.Message);
            }
            throw new AssertionException(what + " succeeded but should have failed");
        }

        public static T Throws<T>(Action call, string what = "call") where T : Exception
        {
            try
            {
                call();
            }
            catch (T e)
            {
                return e;
            }
            catch (Exception e)
            {
                throw new AssertionException(what + " threw " + e.GetType().Name + " instead of " + typeof(T).Name + ": " + e.Message);
            }
            throw new AssertionException(what + " succeeded but should have thrown " + typeof(T).Name);
        }

        public static void Verification(KeywardenException e, VerificationReason reason)
        {
            Equal(KeywardenErrorCode.Verification, e.Code, "code (" + e.Message + ")");
            Equal((VerificationReason?)reason, e.Reason, "reason (" + e.Message + ")");
        }
    }
}
